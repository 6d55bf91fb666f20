#Region Public

// Sum of two numbers.
Function Sum(A, B) Export
	Extra = 0;
	Return A + B;
EndFunction

Procedure Print(Text, Copies)
	WriteText(Text);
EndProcedure

Procedure Dummy(Flag)
	While Flag Do
	EndDo;
EndProcedure

Procedure Long()
	WriteText("A very long line of text that goes on and on past one hundred and twenty characters, so it must be flagged");
EndProcedure

PROCEDURE Upper()
	WriteText(1);
EndProcedure

Procedure NoSemicolon()
	WriteText(1)
EndProcedure

Function NoReturn(Value)
	If Value > 0 Then
		Return 1;
	EndIf;
EndFunction

Procedure ReturnsValue()
	WriteText(1);
	Return True;
EndProcedure

Function Unreachable()
	Raise "stop";
	WriteText(2);
EndFunction

Function Ternary(A, B)
	Return ?(A, 1, ?(B, 2, 3));
EndFunction

Procedure ManyParams(P1, P2, P3, P4, P5, P6, P7, P8)
	WriteText(P1 + P2 + P3 + P4 + P5 + P6 + P7 + P8);
EndProcedure

Procedure Commented()
	WriteText(1);
	//WriteText(2);
	//If A Then
EndProcedure

Procedure ServiceTag()
	WriteText(1); // FIXME later
EndProcedure

Procedure NoElse(Code)
	If Code = 1 Then
		WriteText(1);
	ElsIf Code = 2 Then
		WriteText(2);
	EndIf;
EndProcedure

Procedure UselessLoop(List)
	For Each Item In List Do
		WriteText(List);
	EndDo;
EndProcedure

Procedure EmptyExcept()
	Try
		WriteText(1);
	Except
	EndTry;
EndProcedure

#EndRegion

#Region Public
#EndRegion
