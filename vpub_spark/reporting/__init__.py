"""Reports people look at: one release as a self-contained HTML page (`vpub report`, the
release's page in `vpub serve`) and a privacy-utility sweep drawn the same way
(`vpub explore`). `facts` gathers the numbers from the files (and, for the owner, the
source), `plots` draws them with matplotlib, `html` lays them out.
"""
