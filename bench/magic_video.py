"""MAGIC-Video's store at the size of a SENRI video: graph construction, text vectors, and search latency.

    python bench/magic_video.py [--hours 2.5] [--queries 20] [--encoder minilm|bag] [--min-hits 4]

A synthetic memory of ``--hours`` of video (30-s captions of 25 words from a 400-word vocabulary, their 3-min /
10-min / 1-h groups, 5 entities per caption, 500 semantic triples, 40 topic chains and 10 event chains) is
built with :func:`senri.memory.magic_video.graph.build_graph` and opened as a store; the script prints the node and
edge counts, the seconds to build the graph and embed its texts, and the median and worst seconds of one
search (one PPR pass + quotas + chain facts) over the whole video and with a query time (a visibility-filtered
subgraph). No LLM is called: the builder's text is synthetic, the time bypass is off.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def bag_encoder(texts):
    out = np.zeros((len(texts), 256), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in re.findall(r"\w+", text.lower()):
            out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % 256] += 1.0
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hours", type=float, default=2.5)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--encoder", choices=["minilm", "bag"], default="minilm")
    parser.add_argument("--min-hits", type=int, default=4, help="G-R7 topic-chain hits (generic 4, EgoLife 1)")
    args = parser.parse_args()

    from senri.memory.magic_video.build import SUMMARY_GROUPS, node_vectors
    from senri.memory.magic_video.graph import ChainRow, Episode, build_graph, default_encoder, episode_id
    from senri.memory.magic_video.store import MagicVideoStore
    from senri.memory.store import SearchContext
    from senri.records import Question

    rng = random.Random(0)
    words = [f"w{i}" for i in range(400)]

    def text(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n))

    n_base = int(args.hours * 3600 // 30)
    levels = {"30sec": [Episode("30sec", i * 30.0, i * 30.0 + 30, text(25)) for i in range(n_base)]}
    for level, source, n in SUMMARY_GROUPS:
        items = levels[source]
        levels[level] = [Episode(level, items[i].start_s, items[min(i + n, len(items)) - 1].end_s, text(60))
                         for i in range(0, len(items), n)]
    entities = {episode_id(e.start_s, e.end_s, "30sec"): rng.sample(words, 5) for e in levels["30sec"]}
    semantic = [(rng.choice(words), "relates to", rng.choice(words)) for _ in range(500)]
    chains = [ChainRow("topic", rng.choice(words), rng.uniform(0, args.hours * 3600), None, text(12))
              for _ in range(40 * 5)]
    chains += [ChainRow("event", f"event {k}", s, s + 300, text(15), rng.choice(words))
               for k in range(10) for s in sorted(rng.uniform(0, args.hours * 3600) for _ in range(4))]
    encoder = default_encoder() if args.encoder == "minilm" else bag_encoder

    started = time.perf_counter()
    graph = build_graph(levels, entities, semantic)
    graph_s = time.perf_counter() - started
    started = time.perf_counter()
    vectors = node_vectors(graph, encoder)
    embed_s = time.perf_counter() - started
    store = MagicVideoStore(graph, chains, vectors, {"time_bypass": False, "chains": {"min_hits": args.min_hits}},
                            encoder=encoder)
    print(f"{args.hours:g} h: {len(graph.nodes)} nodes, {len(graph.edges)} edges ({len(graph.pairs())} pairs), "
          f"{len(chains)} chain facts; graph {graph_s:.2f} s, text vectors ({args.encoder}) {embed_s:.1f} s")
    for label, query_time in (("whole video", None), ("query time at half", args.hours * 1800)):
        times, returned = [], []
        for _ in range(args.queries):
            query = text(8)
            question = Question("v", "q", "ES", "x", query, "a", "b", "c", "d", "A")  # tier 1 names its words
            started = time.perf_counter()
            items = store.search(query, 16, context=SearchContext(question=question, query_time_s=query_time))
            times.append(time.perf_counter() - started)
            returned.append(len(items))
        print(f"search, {label}: median {statistics.median(times) * 1000:.0f} ms, worst {max(times) * 1000:.0f} ms "
              f"over {args.queries} queries; {statistics.mean(returned):.1f} items each (16 nodes + chain facts)")


if __name__ == "__main__":
    main()
