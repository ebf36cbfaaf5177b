"""One module per lint rule, named after its stable id; ``registry`` discovers them all."""
