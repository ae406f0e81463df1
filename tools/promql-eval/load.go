package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
)

// staleMarker is the value Prometheus appends when a series is gone from a target's scrape.
var staleMarker = math.Float64frombits(value.StaleNaN)

// load appends every scrape in time order, each sample at its scrape's time, and returns how many
// samples (stale markers included) went in.
func load(db *tsdb.DB, scrapes []scrape) (int, error) {
	sort.SliceStable(scrapes, func(i, j int) bool { return scrapes[i].T < scrapes[j].T })
	// Per target, the series of its previous scrape: those missing from the next get a stale marker.
	previous := map[string]map[string]labels.Labels{}
	total := 0
	for _, s := range scrapes {
		key := s.Job + "\x00" + s.Instance
		seen, n, err := appendScrape(db, s, previous[key])
		if err != nil {
			return total, fmt.Errorf("%s: %w", s.File, err)
		}
		previous[key] = seen
		total += n
	}
	return total, nil
}

func appendScrape(db *tsdb.DB, s scrape, before map[string]labels.Labels) (map[string]labels.Labels, int, error) {
	body, err := os.ReadFile(s.File)
	if err != nil {
		return nil, 0, err
	}
	parser, err := textparse.New(body, "text/plain; version=0.0.4; charset=utf-8", nil, textparse.ParserOptions{})
	if err != nil {
		return nil, 0, err
	}
	app := db.Appender(context.Background())
	seen := map[string]labels.Labels{}
	n := 0
	for {
		entry, err := parser.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			_ = app.Rollback()
			return nil, n, err
		}
		if entry != textparse.EntrySeries {
			continue
		}
		_, _, v := parser.Series()
		var lset labels.Labels
		parser.Labels(&lset)
		lset = withTarget(lset, s)
		if _, err := app.Append(0, lset, s.T, v); err != nil {
			_ = app.Rollback()
			return nil, n, fmt.Errorf("%s: %w", lset, err)
		}
		seen[lset.String()] = lset
		n++
	}
	n += markStale(app, before, seen, s.T)
	return seen, n, app.Commit()
}

// withTarget adds the labels Prometheus adds to every series of a target.
func withTarget(lset labels.Labels, s scrape) labels.Labels {
	b := labels.NewBuilder(lset)
	b.Set("job", s.Job)
	b.Set("instance", s.Instance)
	return b.Labels()
}

func markStale(app storage.Appender, before, now map[string]labels.Labels, t int64) int {
	n := 0
	for key, lset := range before {
		if _, ok := now[key]; ok {
			continue
		}
		if _, err := app.Append(0, lset, t, staleMarker); err == nil {
			n++
		}
	}
	return n
}
