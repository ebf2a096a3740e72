compile resnet20 --profile @DIR/../../profiles/model/resnet20-b64-k40.json --budget 20MiB -o @OUT/plan.json --trace @OUT/plan.json
