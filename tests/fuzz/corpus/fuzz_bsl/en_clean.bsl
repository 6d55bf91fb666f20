Var Cache;

Procedure Fill(Items) Export
	For Each Item In Items Do
		Try
			Cache.Insert(Item.Key, Item.Value);
		Except
			Raise;
		EndTry;
	EndDo;
EndProcedure
