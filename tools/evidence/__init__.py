"""What agents read of the index: clips cut from the media (:mod:`~tools.evidence.clips`), chunk
search (:mod:`~tools.evidence.search`), the retrievers an evaluation names
(:mod:`~tools.evidence.retrieval`: one table of them) and an exported benchmark folder
(:mod:`~tools.evidence.benchmark_folder`).

May import: :mod:`tools.index` and :mod:`tools.contracts`, besides :mod:`store`.
"""
