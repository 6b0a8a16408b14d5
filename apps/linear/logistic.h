// Logistic regression arithmetic: the sigmoid, predictions and the regularised log-loss
// gradient that workers compute on their rows before pushing it to the servers.
//
// Weights are dense, indexed by feature index. All functions are pure: they read their
// inputs and write only their output arguments, so threads may call them concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dataset.h"

namespace linear {

// 1 / (1 + e^-z), computed without overflow for any finite z (exactly 0 or 1 only where
// the true value rounds there).
double Sigmoid(double z);

// Sets (*probs)[r] = Sigmoid(bias + sum of w[j] * x_rj) for every row r of d. Features
// with an index >= w.size() (seen only in the predicted data) weigh 0.
// Throws std::invalid_argument if probs is null.
void Predict(const Dataset& d, const std::vector<double>& w, double bias,
             std::vector<double>* probs);

// The batch gradient in a compact weight space, the core of Gradient and of a worker's
// step (which pulls only the weights its batch touches): feature f's weight is
// w[slot[f]] (slot == nullptr: w[f]). Adds (sigmoid(z) - y) * x_f to grad[slot[f]] and
// sigmoid(z) - y to *grad_b for each of the n rows (not divided by n, no
// regularisation), and returns the summed loss log(1 + e^z) - y z. Every feature the
// rows use must have a slot; rows must be < d.rows() (not checked: the callers have).
double AccumulateGradient(const Dataset& d, const size_t* rows, size_t n, const int64_t* slot,
                          const double* w, double bias, double* grad, double* grad_b);

// For the rows `rows` of d (repeats count repeatedly), computes the objective
//   L = mean over rows of [log(1 + e^z) - y z] + reg_l2 / 2 * ||w||^2,  z = bias + w.x,
// returns L, and stores dL/dw in *grad_w (resized to w.size()) and dL/dbias in *grad_b.
// The bias is not regularised. The loss is exact (not clipped like LogLoss), so it is the
// function whose gradient this is. Throws std::invalid_argument if rows is empty, an
// output is null or d has features beyond w (d.num_features > w.size()), and
// std::out_of_range if a row number is >= d.rows().
double Gradient(const Dataset& d, const std::vector<size_t>& rows, const std::vector<double>& w,
                double bias, double reg_l2, std::vector<double>* grad_w, double* grad_b);

}  // namespace linear
