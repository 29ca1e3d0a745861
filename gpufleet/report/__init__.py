"""Results documents and what is made of them: schema, terminal, HTML, figures, Prometheus."""
