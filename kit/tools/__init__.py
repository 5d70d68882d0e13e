"""The kit's command-line tools, the top layer: nothing else in ``kit`` imports them.

=======================================  ===============================================
``python -m kit.tools.demo``             run the notebooks headless (``make demo``,
                                         ``make notebooks``)
``python -m kit.tools.cluster``          a local standalone cluster and Spark Connect
                                         server (``make cluster``)
``python -m kit.tools.archive``          the JVM's class archive (``make classes``)
``kit.tools.daemon``                     the Python daemon Spark runs for a local session
=======================================  ===============================================
"""
