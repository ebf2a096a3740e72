compile resnet20 --profile @DIR/../../profiles/model/resnet20-b64-k40.json --budget 50% --json -o @OUT/plan.json
