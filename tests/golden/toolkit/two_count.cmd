convert -t folded --sample-index new two.folded
