"""The book's tools: executor and builder (book), paper-scale runs (paper), what they share (common)."""
