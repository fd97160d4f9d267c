"""What agents use and what feeds them, in rooms by purpose (each a package whose docstring says
what it holds and what it may import; ``tests/test_layers.py`` holds them to it):

- :mod:`tools.index`: the indexing pipeline — ingest, media, chunks, transcripts, embeddings,
  OCR, the Qdrant index, segments, near-duplicates and seeds, on one machine or on Ray;
- :mod:`tools.runtime`: where local models run and their files (devices, Whisper and GGUF
  models joined from their parts);
- :mod:`tools.evidence`: what agents read of the index — clips, chunk search, the retrievers,
  a benchmark folder;
- :mod:`tools.providers`: the model adapters, one family each (its light spec under
  ``providers/specs``), and the offline provider;
- :mod:`tools.offline`: the offline harness — synthetic playlists and campaigns, and the
  deterministic answers and "vision" the offline provider gives;
- :mod:`tools.contracts`: the roles' contracts (context, output, prompt, offline answer, model
  slot) that agents and providers both import.

Every room may import :mod:`store`; none imports :mod:`policies`, :mod:`agents` or
:mod:`playlisteval`. Import the submodules directly (``from tools.index import media``); heavy
libraries load lazily.
"""
