//! What mesh itself costs a model: the default system prompt and the tool
//! schemas a model teammate sends with every request, per mode, in tokens
//! (OpenAI's o200k tokenizer; a small local model's counts are within a
//! tenth of it).

use mesh_llm::{tools_json, Tool};
use teammate::{catalog, gate::Gate, model::default_system_prompt};

/// Prints the prompt's and the schemas' tokens in plan mode and once a plan
/// is approved.
pub(crate) fn print() -> anyhow::Result<()> {
    let bpe = tiktoken_rs::o200k_base()?;
    let count = |text: &str| bpe.encode_with_special_tokens(text).len();
    let system = default_system_prompt("alice", "coder");
    println!("\nmodel teammate overhead per request (o200k tokens)");
    println!(
        "{:<10} {:>8} {:>8} {:>8} {:>6}",
        "mode", "prompt", "tools", "total", "tools#"
    );
    for (mode, plan) in [("plan", true), ("approved", false)] {
        // The mode's tools, and the end of a turn (`done`).
        let tools: Vec<Tool> = Gate::tools_of(plan)
            .iter()
            .chain(&[catalog::DONE])
            .filter_map(|t| catalog::tool(t))
            .collect();
        let schemas = tools_json(&tools).to_string();
        let (p, t) = (count(&system), count(&schemas));
        println!("{mode:<10} {p:>8} {t:>8} {:>8} {:>6}", p + t, tools.len());
    }
    Ok(())
}
