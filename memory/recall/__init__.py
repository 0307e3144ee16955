"""Reading: what a context may see (retrieval, recall, the per-turn context), dates in a question, the leak check
on the way out and the operator's read-only overview."""
