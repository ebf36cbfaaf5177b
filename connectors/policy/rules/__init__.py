"""One module per lint rule, named after its stable id; ``registry`` lists them all."""
