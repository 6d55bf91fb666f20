Procedure Main(Unused) Export
	Var X;
	If True Then
		X = 1;
	EndIf;
	For Each Item In Items Do
		Message(Item);
	EndDo;
	Try
		Y = 1;
		Message(Y)
	Except
		Raise;
	EndTry;
EndProcedure

Function F()
	If A Then
		Return 1;
	EndIf;
EndFunction

Function Broken(
	Z = ;
EndFunction
