package server

import (
	"sync"

	"github.com/knowdp/knowdp/noise"
)

// samplerCache keeps the discrete Laplace samplers a dataset's linear
// queries use, by scale. Building one precomputes its tables (tens of
// kilobytes, about 0.1 ms); analysts asking queries of the same shape and
// epsilon reuse it. Samplers are read-only once built, so one may serve
// concurrent queries. The scale is decided by the request and the public
// policy alone, so whether it is cached reveals nothing about the data.
type samplerCache struct {
	mu sync.Mutex
	m  map[float64]noise.DiscreteLaplace
}

// maxCachedSamplers bounds the cache; when full it starts again empty.
const maxCachedSamplers = 256

// get returns the sampler of the given scale, building it if needed.
func (c *samplerCache) get(scale float64) (noise.DiscreteLaplace, error) {
	c.mu.Lock()
	dl, ok := c.m[scale]
	c.mu.Unlock()
	if ok {
		return dl, nil
	}
	dl, err := noise.NewDiscreteLaplace(scale)
	if err != nil {
		return dl, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedSamplers {
		c.m = make(map[float64]noise.DiscreteLaplace)
	}
	c.m[scale] = dl
	return dl, nil
}
