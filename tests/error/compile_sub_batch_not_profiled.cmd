compile @FILE --profile @DIR/inputs/chain3-b4-k40.json --batch 8 --budget 1MiB --sub-batch 8 -o /tmp/ucplan-error-test-output.json
