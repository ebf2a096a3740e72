run @FILE --check --tolerance -1
