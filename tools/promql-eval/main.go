// promql-eval loads Prometheus text-format scrapes into a temporary TSDB, as a Prometheus server's
// scrape loop would (target labels job and instance added, a stale marker for each series that a
// target's next scrape no longer has), and evaluates PromQL queries on them with Prometheus's own
// engine. It exists to draw docs/images/dashboard.svg from real data without a Prometheus server
// (bench/dashboard-picture.ts runs it); it is not part of the product or of its tests.
//
// Usage: promql-eval < request.json > response.json
//
// The request names the scrapes (timestamp in ms, job, instance, file) and the queries (instant at
// `end`, or range over start..end by step, all in ms); the response has each query's series or
// its error, and the Prometheus module version that evaluated them.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/tsdb"
)

type scrape struct {
	T        int64  `json:"t"`
	Job      string `json:"job"`
	Instance string `json:"instance"`
	File     string `json:"file"`
}

type query struct {
	ID    string `json:"id"`
	Expr  string `json:"expr"`
	Range bool   `json:"range"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
	Step  int64  `json:"step"`
}

type request struct {
	Scrapes []scrape `json:"scrapes"`
	Queries []query  `json:"queries"`
}

type series struct {
	Metric map[string]string `json:"metric"`
	// Points as [ms, value]; NaN and ±Inf as null, as JSON has no such numbers.
	Points [][2]*float64 `json:"points"`
}

type result struct {
	ID     string   `json:"id"`
	Error  string   `json:"error,omitempty"`
	Series []series `json:"series"`
}

type response struct {
	Engine  string   `json:"engine"`
	Samples int      `json:"samples"`
	Results []result `json:"results"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "promql-eval:", err)
		os.Exit(1)
	}
}

func run() error {
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		return fmt.Errorf("reading the request: %w", err)
	}
	dir, err := os.MkdirTemp("", "promql-eval-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	opts := tsdb.DefaultOptions()
	// Scrapes of several targets arrive file by file, not in global time order.
	opts.OutOfOrderTimeWindow = int64(24 * time.Hour / time.Millisecond)
	db, err := tsdb.Open(dir, nil, nil, opts, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	samples, err := load(db, req.Scrapes)
	if err != nil {
		return err
	}
	out := response{Engine: engineVersion(), Samples: samples, Results: evaluate(db, req.Queries)}
	enc := json.NewEncoder(os.Stdout)
	return enc.Encode(out)
}

// engineVersion is the version of the Prometheus module this binary was built with (go.mod pins it).
func engineVersion() string {
	info, ok := debug.ReadBuildInfo()
	if ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/prometheus/prometheus" {
				return dep.Path + " " + dep.Version
			}
		}
	}
	return "github.com/prometheus/prometheus (unknown version)"
}

func evaluate(db *tsdb.DB, queries []query) []result {
	engine := promql.NewEngine(promql.EngineOpts{
		MaxSamples:           50_000_000,
		Timeout:              time.Minute,
		LookbackDelta:        5 * time.Minute,
		EnableAtModifier:     true,
		EnableNegativeOffset: true,
	})
	results := make([]result, 0, len(queries))
	for _, q := range queries {
		results = append(results, evaluateOne(engine, db, q))
	}
	return results
}

func evaluateOne(engine *promql.Engine, db *tsdb.DB, q query) result {
	ctx := context.Background()
	var (
		qry promql.Query
		err error
	)
	if q.Range {
		qry, err = engine.NewRangeQuery(ctx, db, nil, q.Expr, time.UnixMilli(q.Start), time.UnixMilli(q.End),
			time.Duration(q.Step)*time.Millisecond)
	} else {
		qry, err = engine.NewInstantQuery(ctx, db, nil, q.Expr, time.UnixMilli(q.End))
	}
	if err != nil {
		return result{ID: q.ID, Error: err.Error(), Series: []series{}}
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return result{ID: q.ID, Error: res.Err.Error(), Series: []series{}}
	}
	return result{ID: q.ID, Series: toSeries(res.Value)}
}

func toSeries(v any) []series {
	out := []series{}
	switch v := v.(type) {
	case promql.Matrix:
		for _, s := range v {
			points := make([][2]*float64, 0, len(s.Floats))
			for _, p := range s.Floats {
				points = append(points, point(p.T, p.F))
			}
			out = append(out, series{Metric: s.Metric.Map(), Points: points})
		}
	case promql.Vector:
		for _, s := range v {
			out = append(out, series{Metric: s.Metric.Map(), Points: [][2]*float64{point(s.T, s.F)}})
		}
	case promql.Scalar:
		out = append(out, series{Metric: map[string]string{}, Points: [][2]*float64{point(v.T, v.V)}})
	}
	return out
}

func point(t int64, f float64) [2]*float64 {
	tf := float64(t)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return [2]*float64{&tf, nil}
	}
	return [2]*float64{&tf, &f}
}
