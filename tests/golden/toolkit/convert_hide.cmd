convert -t folded --hide "^(parse|run)$" new.folded
