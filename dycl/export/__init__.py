"""Each sub-DNN as an exportable module: its graph's shape guards, alternative graphs for
other sizes, and the Python numbers computed from sizes inside it."""
