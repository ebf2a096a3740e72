compile @DIR/../data/chain3.json --profile @FILE --budget 1GiB -o /tmp/ucplan-error-test-output.json
