run @FILE --cuda-graphs
