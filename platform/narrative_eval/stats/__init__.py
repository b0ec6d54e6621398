"""Statistics shared by the studies: clustered bootstrap, score records, paired comparisons, minimum detectable
effects, reference rows, human-anchored means. A study's own statistics live in its package."""

from narrative_eval.stats.bootstrap import DEFAULT_N_BOOT, ClusterBootstrap, percentile_interval

__all__ = ["DEFAULT_N_BOOT", "ClusterBootstrap", "percentile_interval"]
