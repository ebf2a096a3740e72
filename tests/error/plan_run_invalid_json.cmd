run @FILE --iterations 1
