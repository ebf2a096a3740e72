frontier @FILE --profile @DIR/inputs/chain3-b4-k40.json -b 65537 --sub-batch 1
