compile vgg16 --profile @DIR/../../profiles/model/resnet20-b64-k40.json --budget 1MiB -o @OUT/plan.json
