"""What agents use and what feeds them: ingest, media, transcripts, embeddings, the Qdrant index,
the search and clip tools, and (later) model providers.

Import the submodules directly (``from tools import media``); heavy libraries load lazily.
"""
