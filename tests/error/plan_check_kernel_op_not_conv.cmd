check @FILE
