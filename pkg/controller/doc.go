// Package controller runs one declarative controller: it turns change events
// of its sources into Z-set deltas, feeds them through the compiled pipeline,
// and writes the pipeline's output delta into the target (Updater or Patcher)
// through a Client, making no write when the target already holds the
// desired state.
package controller
