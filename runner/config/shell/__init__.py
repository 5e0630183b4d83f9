"""The shell placement checker: where a templated value may sit and flow.

``rules`` is the rule table (which programs run code, which read values
safely), built in part from ``executors`` (GTFOBins-derived data in
``data/``); ``checker`` walks a bash parse tree against it.
"""
