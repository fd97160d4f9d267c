"""The indexing pipeline: ingest (playlists, yt-dlp, local folders), media (probe, chunks,
frames, audio), captions and transcripts, embeddings, OCR, the Qdrant index (vectors), segments,
near-duplicates, seeds and their calibration, the per-video settings record, on one machine
(:mod:`~tools.index.indexer`) or on Ray Data (:mod:`~tools.index.ray_index`).

May import: :mod:`tools.runtime` (devices, model files) and :mod:`tools.providers.specs` (a
provider's endpoint, for DashScope's ASR), besides :mod:`store`.
"""
