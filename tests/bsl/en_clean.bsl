#Region Public

// Computes the sum of the rows.
//
// Parameters:
//  Rows - ValueTable - the rows.
//
// Returns:
//  Number - the sum.
//
Function RowsTotal(Rows) Export
	Total = 0;
	For Each Row In Rows Do
		If Row.Amount > 0 AND Row.Active Then
			Total = Total + Row.Amount;
		ElsIf Row.Amount < 0 OR NOT Row.Active Then
			Continue;
		Else
			Break;
		EndIf;
	EndDo;
	Return Total;
EndFunction

Procedure Notify(Text) Export
	UserMessage = New UserMessage;
	UserMessage.Text = Text;
	UserMessage.Message();
EndProcedure

#EndRegion
