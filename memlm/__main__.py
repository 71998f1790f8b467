from memlm.cli import app

app()
