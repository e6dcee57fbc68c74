//! The web console in real headless Chromium: its pages, the queue, reviewing,
//! the layout at a desktop's and a phone's width, and the words it uses.
//!
//! One test binary (`cargo test -p mesh-tests --test console`), each module linked once.

mod console;
mod console_defects;
mod console_layout;
mod console_pages;
mod console_pr;
mod console_queue;
mod console_review;
mod console_tour;
mod console_words;
