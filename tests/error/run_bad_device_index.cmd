run @DIR/../../plans/resnet20-b64-cpu-16mib.json --device cuda:x
