"""The book's pages and pictures: the pictures of the models (``diagrams``, ``diagrams_others``,
drawn on ``canvas``), the alignment explorer (``explorer``), the in-page translator
(``translator``) and the labs (``labs``: their checks, toy tasks and student notebooks). It imports
no study."""
