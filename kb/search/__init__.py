"""Ranked word search over every error: a lunr index written by the build
(`/api/search-index.json.gz`), read by the site's search box (lunr.js) and by `kb search` (lunr.py),
which score alike, so both rank identically."""
