"""The labs: notebooks in which the student writes a piece of the model (``notebooks/lab*_*.py``,
the book's part "Labs"). ``checks`` compares the student's function with the library's verified
one and names the mistake in one sentence; ``toy`` makes the toy tasks (copy, reverse), trains and
measures; ``student`` turns a lab's source into the student's notebook (``tools/labs.py``)."""
