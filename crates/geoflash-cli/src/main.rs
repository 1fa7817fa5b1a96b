//! The `geoflash` command.
fn main() {
    println!("geoflash {}", env!("CARGO_PKG_VERSION"));
}
