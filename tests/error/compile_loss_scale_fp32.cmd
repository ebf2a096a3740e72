compile resnet20 --profile @DIR/../../profiles/model/resnet20-b64-k40.json --budget 50% --loss-scale static:1024 -o @OUT/plan.json
