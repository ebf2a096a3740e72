frontier @FILE --profile @DIR/inputs/chain3-b4-k40.json --solver exact
