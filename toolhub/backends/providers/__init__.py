"""HTTP-facing backends of the network and media tools: the SSRF guard, the page fetcher and
the search, images and videos providers."""
