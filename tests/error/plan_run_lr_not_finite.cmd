run @FILE --lr inf
