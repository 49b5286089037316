"""LSH Ensemble (Zhu et al., VLDB 2016; docs/algorithms/lshensemble.md): which lake columns contain
at least a share t of a query's distinct values. MinHash signatures, size partitions and (b, r)
tuned per partition and per query answer with candidates; exact containment from JOSIE's stored
sets verifies them."""
