#!/usr/bin/env Rscript
# Exports an R data set as numeric CSV (and optionally libsvm) for apps/linear.
#
#   Rscript export.R hmda      OUT.csv
#   Rscript export.R fertility OUT.csv
#   Rscript export.R spam      OUT.csv [OUT.libsvm]
#
# Conversion (README.md in this directory describes it per data set):
#   * two-level factors become 0/1, the second level being 1
#     (no/yes -> yes=1, female/male -> male=1, nonspam/spam -> spam=1);
#   * factors whose levels are numbers (HMDA's chist, mhist) become those numbers;
#   * integer columns are written as integers, double columns with 15
#     significant digits in fixed notation (16 or 17 where 15 would not read
#     back as the same double); never scientific notation;
#   * R's column order, a header line, no row names, no quotes, "\n" newlines;
#   * rows with NA are dropped (with a message); none of the three sets has any.
# After writing, the CSV is read back and compared with the converted values;
# any difference is an error. Output goes to a temporary file next to OUT that
# replaces OUT only when complete.

args <- commandArgs(trailingOnly = TRUE)
usage <- "usage: Rscript export.R hmda|fertility|spam OUT.csv [OUT.libsvm (spam only)]"
if (length(args) < 2 || length(args) > 3) stop(usage, call. = FALSE)
name <- args[1]
csv_out <- args[2]
libsvm_out <- if (length(args) == 3) args[3] else NA_character_

load_data <- function(name) {
  env <- new.env()
  if (name == "hmda") {
    utils::data("HMDA", package = "AER", envir = env)
    list(df = env$HMDA, label = "deny")
  } else if (name == "fertility") {
    utils::data("Fertility", package = "AER", envir = env)
    list(df = env$Fertility, label = "morekids")
  } else if (name == "spam") {
    utils::data("spam", package = "kernlab", envir = env)
    list(df = env$spam, label = "type")
  } else {
    stop("unknown data set '", name, "'\n", usage, call. = FALSE)
  }
}

# Level that becomes 1 in a two-level factor.
positive_levels <- c("yes", "male", "spam")

to_numeric_column <- function(x, col) {
  if (is.factor(x)) {
    lv <- levels(x)
    num <- suppressWarnings(as.numeric(lv))
    if (!anyNA(num)) {
      # Levels are numbers (e.g. chist "1".."6"): use them.
      return(as.integer(round(num[as.integer(x)])))
    }
    if (length(lv) == 2 && lv[2] %in% positive_levels) {
      return(as.integer(x == lv[2]))
    }
    stop("column ", col, ": no conversion rule for levels ",
         paste(lv, collapse = "/"), call. = FALSE)
  }
  if (is.logical(x)) return(as.integer(x))
  if (is.integer(x) || is.double(x)) return(x)
  stop("column ", col, ": unsupported type ", class(x)[1], call. = FALSE)
}

format_column <- function(x) {
  if (is.integer(x)) return(format(x, scientific = FALSE, trim = TRUE))
  s <- trimws(formatC(x, digits = 15, format = "fg"))
  for (digits in 16:17) {  # the fewest digits that read back as the same double
    bad <- as.numeric(s) != x
    if (any(bad)) s[bad] <- trimws(formatC(x[bad], digits = digits, format = "fg"))
  }
  if (any(grepl("[eE]", s))) stop("scientific notation in output", call. = FALSE)
  if (any(as.numeric(s) != x)) stop("formatted values do not read back", call. = FALSE)
  s
}

write_atomic <- function(lines, path) {
  tmp <- paste0(path, ".tmp", Sys.getpid())
  con <- file(tmp, open = "wb")  # binary: "\n" line ends on every platform
  writeLines(lines, con, sep = "\n", useBytes = TRUE)
  close(con)
  if (!file.rename(tmp, path)) stop("cannot rename ", tmp, " to ", path, call. = FALSE)
}

d <- load_data(name)
df <- d$df
attributes(df)[setdiff(names(attributes(df)), c("names", "row.names", "class"))] <- NULL
na_rows <- !stats::complete.cases(df)
if (any(na_rows)) {
  message(name, ": dropping ", sum(na_rows), " rows with NA")
  df <- df[!na_rows, , drop = FALSE]
}
out <- data.frame(lapply(stats::setNames(names(df), names(df)),
                         function(col) to_numeric_column(df[[col]], col)),
                  check.names = FALSE)
text <- lapply(out, format_column)
lines <- c(paste(names(out), collapse = ","), do.call(paste, c(unname(text), sep = ",")))
write_atomic(lines, csv_out)

# Read back and compare.
back <- utils::read.csv(csv_out, check.names = FALSE, colClasses = "numeric")
if (!identical(names(back), names(out))) stop("read-back: column names differ", call. = FALSE)
if (nrow(back) != nrow(out)) stop("read-back: row count differs", call. = FALSE)
for (col in names(out)) {
  if (anyNA(back[[col]]) || any(back[[col]] != as.numeric(out[[col]]))) {
    stop("read-back: column ", col, " differs", call. = FALSE)
  }
}
cat(sprintf("%s: %d rows, %d columns (label %s: %d of %d = 1)\n", csv_out, nrow(out),
            ncol(out), d$label, sum(out[[d$label]]), nrow(out)))

if (!is.na(libsvm_out)) {
  features <- setdiff(names(out), d$label)
  y <- out[[d$label]]
  ftext <- do.call(cbind, text[features])
  nz <- as.matrix(out[features]) != 0
  lines <- vapply(seq_len(nrow(out)), function(i) {
    j <- which(nz[i, ])
    paste(c(y[i], paste0(j, ":", ftext[i, j])), collapse = " ")
  }, character(1))
  write_atomic(lines, libsvm_out)
  cat(sprintf("%s: %d rows, %d features (1-based indices, %d non-zeros)\n", libsvm_out,
              length(lines), length(features), sum(nz)))
}
