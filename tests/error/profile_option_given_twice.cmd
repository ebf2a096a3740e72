profile @FILE --batch 2 --batch 4 --device model:k40 -o @OUT/profile.json
